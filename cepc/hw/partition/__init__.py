"""Stream partitioners: keep each partition key's state (Woods et al.'s pipeline, or a table in block RAM)."""

from .pipeline import PipelinePartitioner, SinglePartition
from .table import TablePartitioner

__all__ = ["PipelinePartitioner", "SinglePartition", "TablePartitioner"]
