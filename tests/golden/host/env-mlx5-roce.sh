export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'
export NCCL_IB_TC=106
export NCCL_IB_ROCE_VERSION_NUM=2
export NCCL_IB_ADDR_FAMILY=AF_INET
export NCCL_SOCKET_IFNAME='=ens1f0np0,ens1f1np1'
export GLOO_SOCKET_IFNAME=ens1f0np0
export NCCL_NET_GDR_LEVEL=PHB
# RoCE v2 IPv4 GID index per port: mlx5_0:1=3, mlx5_1:1=3
