"""What only the course needs: the walkthrough, counting, the head-count sweep, lessons, scaling, notebook display."""
