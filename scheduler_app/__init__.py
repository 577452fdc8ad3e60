"""A priority job scheduler for Django: timed jobs, a dispatcher, an admin and an API."""
