
ByJöÕeIéJqEøQgÔÀK