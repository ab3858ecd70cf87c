import MediaCore

/// Wires two ICE agents as signalling would: each one's candidates trickle to the other through
/// `onCandidate`, and each learns the other's credentials. Starting the agents (and reading their
/// sockets) is left to the caller. The agents are captured weakly: their owners keep them.
package func exchangeICESignalling(_ a: ICEAgent, _ b: ICEAgent) {
    a.onCandidate = { [weak b] c in b?.addRemoteCandidate(c) }
    b.onCandidate = { [weak a] c in a?.addRemoteCandidate(c) }
    a.setRemoteCredentials(ufrag: b.localUfrag, password: b.localPassword)
    b.setRemoteCredentials(ufrag: a.localUfrag, password: a.localPassword)
}
