"""Building the index from disk: finding and watching debug roots and traces, loading runs and graph folders, and the
analyses that turn parsed files into index records."""
