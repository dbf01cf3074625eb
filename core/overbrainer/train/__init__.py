"""Training: the Axolotl configuration, the job directory, the commands' logic."""
