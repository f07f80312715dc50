"""A function's own Spark streaming query: building it, admitting work, and its batch commit."""
