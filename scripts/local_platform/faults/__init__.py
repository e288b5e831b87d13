"""The faults `make soak` (and CI's short soak) strike the local cluster topology with, beside the platform they act
on: ways into its processes (`cluster`), a Postgres tablespace filled up (`full_disk`), links cut with nftables
(`network_partition`), the moments a fault waits for (`moments`), each kind and how its recovery is judged
(`injection`), and the report by kind (`report`). The soak itself, its workload and verdict, is a test:
tests/integration/cluster/test_soak.py."""
