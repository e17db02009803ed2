"""The catalogues: worked.pot (the English msgids, `make extract`) and <lang>/LC_MESSAGES/worked.po and .mo."""
