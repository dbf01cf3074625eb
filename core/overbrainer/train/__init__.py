"""Training: the Axolotl configuration, the run directory, the commands' logic."""
