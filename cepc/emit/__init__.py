"""emit stage of cepc."""
