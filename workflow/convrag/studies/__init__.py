"""What is specific to one paper; everything shared lives outside this package."""
