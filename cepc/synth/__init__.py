"""synth stage of cepc."""
