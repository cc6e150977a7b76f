"""What only the course needs: the walkthrough, counting, the head-count sweep, lessons, scaling, a post-LN block
for comparison (notebook 04), notebook display, and the learner's copy of the materials (``mhattn course init``)."""
