BbsJ
×#=