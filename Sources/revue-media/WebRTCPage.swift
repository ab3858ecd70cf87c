// The page `revue-media webrtc` serves at `/`: it opens the camera and microphone, POSTs its
// offer (sendrecv audio and video) to /session, plays what Revue sends, shows the connection's
// state, and DELETEs the session on "Hang up" or when the page goes. A `#token=TOKEN` fragment in
// the page's address is sent as the bearer token.
// `mediaStats()` returns the counters as JSON text (the tests read it over the DevTools protocol).

/// The HTML of the page. Thread rule: a constant. Cost: none.
enum WebRTCPage {
    static let html = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Revue WebRTC</title>
        <style>
        body{margin:0;background:#111;color:#ddd;font:14px sans-serif}
        video{display:block;width:320px;height:240px;background:#000}
        #row{display:flex;gap:8px;padding:8px}#status{padding:0 8px;white-space:pre}
        </style></head><body>
        <video id="remote" autoplay muted playsinline></video>
        <div id="row"><video id="local" autoplay muted playsinline></video></div>
        <div id="row"><button id="call">Call</button><button id="hangup">Hang up</button>
        <label><input id="mute" type="checkbox"> mute Revue's audio</label></div>
        <div id="status">starting</div>
        <audio id="remoteAudio" autoplay></audio>
        <script>
        let pc = null, location_ = null, localStream = null;
        // A token given as http://HOST:PORT/#token=TOKEN (a fragment never leaves the browser).
        const token = new URLSearchParams(window.location.hash.slice(1)).get('token');
        const auth = token ? {'Authorization': 'Bearer ' + token} : {};
        const status = t => { document.getElementById('status').textContent = t; };
        async function gathered(pc) {
          if (pc.iceGatheringState === 'complete') return;
          await new Promise(done => {
            pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') done(); });
            setTimeout(done, 3000);
          });
        }
        async function call() {
          if (pc) return 'already calling';
          pc = new RTCPeerConnection();
          pc.ontrack = e => {
            const stream = new MediaStream([e.track]);
            if (e.track.kind === 'video') document.getElementById('remote').srcObject = stream;
            else document.getElementById('remoteAudio').srcObject = stream;
          };
          pc.onconnectionstatechange = () => status('connection ' + pc.connectionState);
          localStream = await navigator.mediaDevices.getUserMedia(
            {audio: true, video: {width: 320, height: 240, frameRate: 30}});
          document.getElementById('local').srcObject = localStream;
          for (const t of localStream.getTracks()) pc.addTransceiver(t, {direction: 'sendrecv', streams: [localStream]});
          await pc.setLocalDescription(await pc.createOffer());
          await gathered(pc);
          const response = await fetch('/session', {method: 'POST', headers: {...auth, 'Content-Type': 'application/sdp'},
                                                     body: pc.localDescription.sdp});
          if (response.status !== 201) throw new Error('Revue answered ' + response.status + ': ' + await response.text());
          location_ = response.headers.get('Location');
          await pc.setRemoteDescription({type: 'answer', sdp: await response.text()});
          status('answered, connecting');
          return pc.signalingState;
        }
        async function hangup() {
          if (location_) await fetch(location_, {method: 'DELETE', headers: auth});
          location_ = null;
          if (localStream) for (const t of localStream.getTracks()) t.stop();
          if (pc) pc.close();
          pc = null;
          status('hung up');
          return 'closed';
        }
        function mediaStopSending() {
          for (const t of localStream.getTracks()) t.stop();
          return 'stopped';
        }
        async function mediaStats() {
          if (!pc) return JSON.stringify({connection: 'none'});
          const out = {connection: pc.connectionState};
          const report = await pc.getStats(), codecs = {};
          report.forEach(s => { if (s.type === 'codec') codecs[s.id] = s.mimeType; });
          report.forEach(s => {
            if (s.type === 'outbound-rtp' && s.kind === 'video') { out.framesSent = s.framesSent; out.sentCodec = codecs[s.codecId]; }
            if (s.type === 'inbound-rtp' && s.kind === 'video') {
              out.framesDecoded = s.framesDecoded; out.framesReceived = s.framesReceived;
              out.receivedCodec = codecs[s.codecId]; out.receivedWidth = s.frameWidth; out.receivedHeight = s.frameHeight;
            }
            if (s.type === 'inbound-rtp' && s.kind === 'audio') { out.audioLevel = s.audioLevel; out.totalAudioEnergy = s.totalAudioEnergy; }
            if (s.type === 'outbound-rtp' && s.kind === 'audio') out.audioPacketsSent = s.packetsSent;
          });
          return JSON.stringify(out);
        }
        document.getElementById('call').onclick = () => call().catch(e => status(String(e)));
        document.getElementById('hangup').onclick = () => hangup();
        document.getElementById('mute').onchange = e => { document.getElementById('remoteAudio').muted = e.target.checked; };
        window.addEventListener('pagehide', () => { if (location_) fetch(location_, {method: 'DELETE', headers: auth, keepalive: true}); });
        call().catch(e => status(String(e)));
        </script></body></html>
        """
}
