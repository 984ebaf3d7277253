"""The protocol a deployment runs, and its simulation: partition rows over clients, encode each
client's report, mask and securely sum, aggregate into a release; `simulate` runs it all on data
held in one place."""
