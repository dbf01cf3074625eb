"""What a training job is, independent of where it runs, and the files shipped with it."""
