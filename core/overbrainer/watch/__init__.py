"""``run`` as a cycle, and ``watch``: a cycle after every change to the project's inputs."""
