module goro-spawnpark

go 1.19
