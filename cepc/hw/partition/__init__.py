"""Stream partitioners: keep one NFA state vector per partition key."""

from .pipeline import PipelinePartitioner, SinglePartition

__all__ = ["PipelinePartitioner", "SinglePartition"]
