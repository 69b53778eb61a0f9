"""The IR and the automata built from it: code-point sets, UTF-8 byte DFAs and operations on them."""
