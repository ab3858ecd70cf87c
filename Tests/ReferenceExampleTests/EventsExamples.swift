// The Swift examples of the reference page "Events" (../shared/reference/revue-events.md), copied
// unchanged, one after the other. Compiled in Swift 5 language mode.

import RevueSDK

/// Show the mute request prompt from one layer only. The participant's ParticipantDelegate receives
/// the same didReceiveMuteRequest, so handling it there as well would show the prompt twice.
final class MuteRequestPrompter: RoomDelegate {
    var onMuteRequest: ((RemoteParticipant, Bool) -> Void)?

    func room(_ room: Room, participant: RemoteParticipant, didReceiveMuteRequest isMuted: Bool) {
        onMuteRequest?(participant, isMuted)
    }
}

import RevueSDK

/// Follow one participant, for example to drive their video tile. The delegate list holds weak
/// references, so keep the observer alive for as long as the tile is shown.
final class ParticipantTileObserver: ParticipantDelegate {
    var onSpeaking: ((Bool) -> Void)?
    var onMuted: ((TrackPublication, Bool) -> Void)?

    func observe(friendId: String) {
        Room.shared.remoteParticipants[friendId]?.delegates.add(delegate: self)
    }

    func participant(_ participant: Participant, didUpdateIsSpeaking isSpeaking: Bool) {
        onSpeaking?(isSpeaking)
    }

    func participant(_ participant: Participant, trackPublication: TrackPublication, didUpdateIsMuted isMuted: Bool) {
        onMuted?(trackPublication, isMuted)
    }
}

import RevueSDK

/// Highlight whoever is speaking. RoomDelegate gets the whole list of speakers, loudest first,
/// each time it changes; Room.shared.activeSpeakers holds the same list.
final class ActiveSpeakerHandler: RoomDelegate {
    var onSpeakersChanged: (([Participant]) -> Void)?

    func room(_ room: Room, didUpdateSpeakingParticipants speakers: [Participant]) {
        onSpeakersChanged?(speakers)
    }
}

import RevueSDK
import Foundation

struct ChatMessage: Decodable {
    let text: String
}

/// Delegate methods are called on the main thread. Decode on a background queue,
/// then come back to the main thread to update the UI.
final class ChatMessageHandler: RoomDelegate {
    var onMessage: ((RemoteParticipant, ChatMessage) -> Void)?
    private let decodeQueue = DispatchQueue(label: "chat.decode", qos: .userInitiated)

    func room(_ room: Room, participant: RemoteParticipant, didReceiveMessage message: String) {
        decodeQueue.async { [weak self] in
            guard let chat = try? JSONDecoder().decode(ChatMessage.self, from: Data(message.utf8)) else { return }
            DispatchQueue.main.async {
                self?.onMessage?(participant, chat)
            }
        }
    }
}
