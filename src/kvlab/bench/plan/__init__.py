"""Planning the load: queries and prompts, prompt sizing, load-point schedules, run order."""
