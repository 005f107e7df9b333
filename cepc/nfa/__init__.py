"""nfa stage of cepc."""
