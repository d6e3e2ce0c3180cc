module goro-blockfree

go 1.19
