"""lang stage of cepc."""
