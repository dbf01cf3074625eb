"""The dataset stages: subtopics, questions, answers, split."""
