"""Services: one public method = one use case = one transaction."""
