"""The account lifecycle's background jobs (SPEC §3b): archive, restore or delete an account's items."""
