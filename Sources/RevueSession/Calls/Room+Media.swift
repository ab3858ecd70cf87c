// The media side of a call. Until the engine's send and receive pipelines are on main this file
// keeps the call layer's media hooks in one place; see docs/session.md "Calls: media".

extension Room {
    func receiveMediaSignal(_ s: CallSignal, from id: String) {}
    func participantConnectedMedia(_ p: RemoteParticipant) {}
    func participantDisconnectedMedia(_ p: RemoteParticipant) {}
    func localTrackPublished(_ pub: LocalTrackPublication) {}
    func localTrackUnpublished(_ pub: LocalTrackPublication) {}
    func localTrackMuteChanged(_ pub: LocalTrackPublication) {}
    func remoteSubscriptionChanged(_ pub: RemoteTrackPublication) {}
    func remoteMuteChanged(_ p: RemoteParticipant, _ pub: TrackPublication) {}
    func remoteWantsTrack(_ p: RemoteParticipant, sid: String, wants: Bool) {}
    func remoteModeChanged(_ p: RemoteParticipant) {}
    func tickMedia(now: Double) {}
    /// Fraction of media packets lost from a participant recently (0 without media).
    func mediaLoss(_ p: RemoteParticipant) -> Double { 0 }

    /// Recomputes the speakers list (loudest first) and tells the room when it changed.
    func updateActiveSpeakers() {
        var speakers: [Participant] = remoteParticipants.values.filter(\.isSpeaking)
        if localParticipant.isSpeaking { speakers.append(localParticipant) }
        speakers.sort { $0.audioLevel > $1.audioLevel }
        guard speakers.map(\.identity) != activeSpeakers.map(\.identity) else { return }
        activeSpeakers = speakers
        post(nil, room: { $1.room($0, didUpdateSpeakingParticipants: speakers) }, participant: nil)
    }
}
