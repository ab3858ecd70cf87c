// RevueSession: friends, presence, messages, invitations and calls, the session API that RevueSDK
// exports. How it works underneath: docs/session.md and docs/architecture.md.
internal import MediaCore

/// The version of the Revue session protocol this build speaks.
public let revueProtocolVersion: UInt8 = 5
