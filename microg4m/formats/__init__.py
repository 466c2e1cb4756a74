"""The files that two parts share: their columns, readers and writers."""
