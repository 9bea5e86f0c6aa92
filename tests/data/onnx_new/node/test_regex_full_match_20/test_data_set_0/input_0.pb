2www.google.com2www.facebook.com2www.bbc.co.uk2
google.comBx