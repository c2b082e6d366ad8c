"""Data: in-memory image sets and their batch loader (datasets, image_folder, loader); image folders and webdataset
shards streamed through DataLoader workers (stream_index, stream_views, stream_loader, shards); text."""

from vitpe.data.datasets import DataError, ImageSet, load_cifar, synthetic_images
from vitpe.data.image_folder import load_folder_split, load_imagenette
from vitpe.data.loader import BatchLoader, channel_stats, step_seed

__all__ = ["BatchLoader", "DataError", "ImageSet", "channel_stats", "load_cifar", "load_folder_split",
           "load_imagenette", "step_seed", "synthetic_images"]
