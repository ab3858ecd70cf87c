// The reference's Swift examples (../shared/reference) are copied unchanged into this target, one
// file per reference page, so a rename in the API breaks the build here first. Tests that use
// Revue.shared live in FriendsExamplesBehaviour (one serialized suite: there is one shared instance).
import Testing
import Foundation
import RevueSDK

@Suite struct ReferenceExamplesCompile {
    @Test func sdkModuleLoads() { #expect(revueProtocolVersion >= 1) }
}
