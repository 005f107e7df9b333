"""hw stage of cepc."""
