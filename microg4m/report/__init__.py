"""Reports: statistics, previews, the datasheet."""
