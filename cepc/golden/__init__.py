"""golden stage of cepc."""
