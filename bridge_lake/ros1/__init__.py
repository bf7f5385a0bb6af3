"""Publishing into a ROS 1 graph without ROS installed: the master and slave XML-RPC APIs
(`master`, `slave`) and TCPROS publishers (`node`), on the stdlib and asyncio.

`bridge-lake play --ros1` and `bridge-lake live --ros1` use it. The wire format is
`formats.ros.tcpros`; what a channel is announced as, `formats.ros.ros1_form`.
"""
