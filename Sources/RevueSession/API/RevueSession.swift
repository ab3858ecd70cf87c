// RevueSession: friends, presence, messages, invitations and calls (the RevueSDK API of
// ../shared/reference). Filled by the session issues; see docs/architecture.md.
internal import MediaCore

/// The version of the Revue session protocol this build speaks.
public let revueProtocolVersion: UInt8 = 2
