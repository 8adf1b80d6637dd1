"""What a launch carries and how it runs: arguments and composite arguments, geometry, the
request that crosses to the server, the resolved dispatch and its execute scope, the host
backends' mechanism, and the warm paths (``launch/warm_match.py`` is what every backend's warm launch
shares; ``launch/warm_host.py`` the host backends').
"""
