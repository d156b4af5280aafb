"""The loop IR the stages share: its nodes (`nodes`), integer index functions (`index_functions`) and Dynamo's size
symbols as the compiler sees them (`size_symbols`)."""
