"""Static files of the voting page (a package so that setuptools ships them)."""
