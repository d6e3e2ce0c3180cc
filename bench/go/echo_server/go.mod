module goro-bench-echo-server

go 1.19
