module memorystore.local/nodeprobe

go 1.26
