"""Writers: each turns a format-free Solution into one output format."""
