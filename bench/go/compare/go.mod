module goro-compare

go 1.19
