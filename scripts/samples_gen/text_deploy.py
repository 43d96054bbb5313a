"""Sample 2: transcript_text of moving Qwen3.6-27B to host kpro5 (case study 001)."""

from __future__ import annotations

from .common import Hint, Result, utc
from .logs import Boot, decode_batch, nvidia_smi, sg, sglang_boot

FILE = "qwen36_kpro5_deploy.txt"
FIRST_ID = 6800
MODEL = "/models/Qwen3.6-27B"
LAUNCH = ("python3 -m sglang.launch_server --model-path /models/Qwen3.6-27B --tp 1 --port 30000 --host 0.0.0.0 "
          "--reasoning-parser qwen3 --trust-remote-code --speculative-algorithm NEXTN --speculative-num-steps 3 "
          "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


class Transcript:
    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.next_id = FIRST_ID
        self.hints: list[Hint] = []

    def msg(self, role: str, text: str, *calls: tuple[str, str], tags: tuple[str, ...] = ()) -> int:
        mid = self.next_id
        self.next_id += 1
        body = [f"<msg id={mid}> {role}: {text}".rstrip()]
        for cmd, out in calls:
            body.append(f"[bash] {cmd}")
            if out:
                body.append(out)
        self.blocks.append("\n".join(body))
        for tag in tags:
            self.hints.append(Hint(FILE, str(mid), tag))
        return mid

    def render(self) -> str:
        return "\n\n".join(self.blocks) + "\n"


def _mem_error_log(frac: float) -> str:
    t = utc(2026, 5, 20, 16, 12, 4)
    return "\n".join([
        f"{sg(t)}Load weight end. type=Qwen3_5ForConditionalGeneration, dtype=torch.bfloat16, avail mem=41.07 GB, mem usage=51.92 GB.",
        f"{sg(t)}Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2874, in run_scheduler_process',
        "    scheduler = Scheduler(",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", line 1733, in init_memory_pool',
        "    raise RuntimeError(",
        f"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static={frac}",
        "",
        f"{sg(t, None)}Received sigquit from a child process. It usually means the child failed.",
    ])


def build() -> Result:
    T = Transcript()
    u, a = "user", "assistant"
    T.msg(u, "kpro6 is being decommissioned tonight. Move the Qwen3.6-27B deployment to kpro5 (same LXC setup, GPU is an RTX PRO 6000). "
             "Keep MTP on, port 30000, same as before.")
    T.msg(a, "Let me look at kpro5 first: driver, GPU binding, container.",
          ("ssh kpro5 'nvidia-smi; lspci -nnk -d 10de: | head -6'",
           "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n\n"
           "01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GB202GL [RTX PRO 6000 Blackwell Workstation Edition] [10de:2bb1] (rev a1)\n"
           "\tSubsystem: NVIDIA Corporation Device [10de:204b]\n\tKernel driver in use: vfio-pci\n\tKernel modules: nvidia_drm, nvidia\n"
           "01:00.1 Audio device [0403]: NVIDIA Corporation Device [10de:22e8] (rev a1)\n\tKernel driver in use: vfio-pci"))
    T.msg(a, "The GPU is bound to vfio-pci (it was passed through to a VM) and there is no host driver. kpro6 ran 580.126.09; I'll install the same "
             "version on the host, unbind from vfio-pci and then match the userspace libraries inside the LXC.",
          ("ssh kpro5 'cat /etc/modprobe.d/vfio.conf; ls /root/*.run 2>/dev/null'",
           "options vfio-pci ids=10de:2bb1,10de:22e8\nsoftdep nvidia pre: vfio-pci"),
          tags=("diagnosis",))
    T.msg(a, "",
          ("ssh kpro5 'rm /etc/modprobe.d/vfio.conf && update-initramfs -u -k all >/dev/null && wget -q https://us.download.nvidia.com/XFree86/Linux-x86_64/580.126.09/NVIDIA-Linux-x86_64-580.126.09.run -O /root/NVIDIA-Linux-x86_64-580.126.09.run && echo ok'",
           "ok"))
    T.msg(a, "Unbinding the functions from vfio-pci without a reboot, then installing the driver.",
          ("ssh kpro5 'echo 0000:01:00.0 > /sys/bus/pci/drivers/vfio-pci/unbind; echo 0000:01:00.1 > /sys/bus/pci/drivers/vfio-pci/unbind; "
           "sh /root/NVIDIA-Linux-x86_64-580.126.09.run --silent --dkms --no-opengl-files 2>&1 | tail -3'",
           "Verifying archive integrity... OK\nUncompressing NVIDIA Accelerated Graphics Driver for Linux-x86_64 580.126.09......\n"
           "Installation of the NVIDIA Accelerated Graphics Driver for Linux-x86_64 (version: 580.126.09) is now complete."))
    T.msg(a, "", ("ssh kpro5 nvidia-smi",
                  nvidia_smi(utc(2026, 5, 20, 15, 41, 10), driver="580.126.09", cuda="13.0", gpus=[(29, 18, 0, 0)])))
    T.msg(a, "Host driver is up. Now the container: pass the device nodes and install the matching 580.126.09 userspace libs without the kernel module.",
          ("ssh kpro5 'cat >> /etc/pve/lxc/205.conf <<EOF\nlxc.cgroup2.devices.allow: c 195:* rwm\nlxc.cgroup2.devices.allow: c 509:* rwm\n"
           "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\nlxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
           "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\nEOF\npct reboot 205 && echo rebooted'", "rebooted"))
    T.msg(a, "", ("ssh qwen-kpro5 'sh /root/NVIDIA-Linux-x86_64-580.126.09.run --silent --no-kernel-module 2>&1 | tail -1; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv'",
                  "Installation of the NVIDIA Accelerated Graphics Driver for Linux-x86_64 (version: 580.126.09) is now complete.\n"
                  "name, driver_version, memory.total [MiB]\nNVIDIA RTX PRO 6000 Blackwell Workstation Edition, 580.126.09, 97887 MiB"))
    T.msg(a, "GPU visible inside the LXC with driver 580.126.09. Copying the weights from kpro6 (52 GB BF16).",
          ("ssh qwen-kpro5 'rsync -a --info=progress2 kpro6:/models/Qwen3.6-27B /models/ | tail -1'",
           " 55,812,093,441 100%  412.33MB/s    0:02:09 (xfr#23, to-chk=0/31)"))
    T.msg(u, "go ahead and start it with the same flags as kpro6")
    T.msg(a, "Starting with the kpro6 command line (mem-fraction-static 0.80).",
          ("ssh qwen-kpro5 'nohup " + LAUNCH + " --mem-fraction-static 0.80 > /root/qwen.log 2>&1 &'", ""),
          tags=("launch",))
    T.msg(a, "", ("sleep 90; ssh qwen-kpro5 'tail -5 /root/qwen.log'", _mem_error_log(0.8)), tags=("error",))
    T.msg(a, "Not enough memory for the KV/state pools at 0.80. The model is a GDN hybrid: besides the KV cache for the full-attention layers it "
             "needs a Mamba-style state pool per running request, and MTP adds draft state. Raising the fraction to 0.85.",
          ("ssh qwen-kpro5 'rm -f /root/qwen.log; nohup " + LAUNCH + " --mem-fraction-static 0.85 > /root/qwen.log 2>&1 &'", ""),
          tags=("launch",))
    T.msg(a, "", ("sleep 90; ssh qwen-kpro5 'tail -5 /root/qwen.log'", _mem_error_log(0.8)), tags=("error",))
    T.msg(a, "Still failing even at 0.85 — wait, the message says `mem_fraction_static=0.8`. Checking whether this log is even from the new run.",
          ("ssh qwen-kpro5 'ls -la --time-style=full-iso /root/qwen.log; pgrep -fa launch_server | cut -c1-80; date'",
           "-rw-r--r-- 1 root root 18234 2026-05-20 16:12:09.418231022 +0000 /root/qwen.log\n"
           "16:19:40 ... (no launch_server process)\nWed May 20 16:19:41 UTC 2026"))
    T.msg(a, "The log is stale: its mtime is from the first run. My second command was `rm -f /root/qwen.log; nohup ...` in one ssh session and the "
             "server never started — nohup'd children are killed when the ssh session closes inside this LXC, so the file I read was the old one "
             "recreated by... no, simply never replaced. Two problems: (1) I read a stale log, (2) nohup does not survive ssh exit here.",
          tags=("diagnosis",))
    T.msg(a, "Confirming the nohup theory with a harmless process.",
          ("ssh qwen-kpro5 'nohup sleep 300 > /dev/null 2>&1 &' ; sleep 2; ssh qwen-kpro5 'pgrep -a sleep || echo none'", "none"))
    T.msg(a, "", ("ssh qwen-kpro5 'setsid nohup sleep 300 > /dev/null 2>&1 < /dev/null &' ; sleep 2; ssh qwen-kpro5 'pgrep -a sleep || echo none'",
                  "4121 sleep 300"))
    T.msg(a, "That's it: in this container the session's process group is torn down when ssh exits, so a plain `nohup … &` dies with it. "
             "`setsid` puts the server in its own session and it survives. Relaunching at 0.85 with setsid and a fresh log name.",
          ("ssh qwen-kpro5 'setsid nohup " + LAUNCH + " --mem-fraction-static 0.85 > /root/qwen_085.log 2>&1 < /dev/null & echo $!'", "4388"),
          tags=("diagnosis", "launch"))
    T.msg(a, "", ("sleep 100; ssh qwen-kpro5 'tail -4 /root/qwen_085.log'", _mem_error_log(0.85).replace("avail mem=41.07", "avail mem=45.96")),
          tags=("error",))
    T.msg(a, "A real failure this time, at 0.85. Looking at how the pool is split.",
          ("ssh qwen-kpro5 'grep -iE \"mamba|state|max_running\" /root/qwen_085.log | head -6'",
           f"{sg(utc(2026, 5, 20, 16, 23, 31))}Mamba cache: max_mamba_cache_size=256, mamba_full_memory_ratio=0.9, ssm_state_size=27.65 GB\n"
           f"{sg(utc(2026, 5, 20, 16, 23, 31))}max_running_requests is not set; using 256 for hybrid GDN model"))
    T.msg(a, "The Mamba/GDN state cache is sized for 256 running requests (27.65 GB) and `--mamba-full-memory-ratio 0.9` leaves almost nothing for "
             "the full-attention KV cache, so the allocator reports not enough memory no matter the fraction. We only need 16 concurrent requests. "
             "Setting `--max-running-requests 16 --mamba-full-memory-ratio 0.5`.",
          tags=("diagnosis",))
    T.msg(a, "", ("ssh qwen-kpro5 'setsid nohup " + LAUNCH + " --mem-fraction-static 0.85 --max-running-requests 16 --mamba-full-memory-ratio 0.5 "
                  "> /root/qwen_mtp.log 2>&1 < /dev/null & echo $!'", "4610"), tags=("launch",))
    b = Boot(MODEL, tp=1, port=30000, mem_frac=0.85, weights_gb=51.9, shards=11, load_s=58, mla=False, context_len=262144,
             max_bs=16, max_running=16, spec=True, pid=4610, rng_seed=33)
    L = sglang_boot(utc(2026, 5, 20, 16, 27, 2), b)
    L.lines = [(t, x.replace("DeepseekV4", "Qwen3_5")) for t, x in L.lines]
    from datetime import timedelta
    T.msg(a, "", ("sleep 120; ssh qwen-kpro5 'tail -3 /root/qwen_mtp.log'", L.tail(3, L.start + timedelta(seconds=122))))
    T.msg(a, "", ("sleep 60; ssh qwen-kpro5 'tail -3 /root/qwen_mtp.log'", L.tail(3, L.end())))
    T.msg(a, "Server is fired up and ready to roll. Quick test.",
          ("curl -s kpro5:30000/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\":\"/models/Qwen3.6-27B\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"max_tokens\":200,\"temperature\":0.7}' | python3 -c 'import json,sys; m=json.load(sys.stdin)[\"choices\"][0][\"message\"]; print(m[\"reasoning_content\"][:400]); print(\"--\", m[\"content\"])'",
           "The user's question is 2+2. The user's question is 2+2. The user's question is 2+2. The user's question is 2+2. The user's question is 2+2. "
           "The user's question is 2+2. The user's question is 2+2. The user's question is 2+2. The user's question is 2+2. The user's question is 2+2. "
           "The user's question is 2+2. The user's q\n-- None"),
          tags=("readiness_claim", "smoke_test"))
    T.msg(a, "", ("ssh qwen-kpro5 'grep \"Decode batch\" /root/qwen_mtp.log | tail -2'",
                  "\n".join(decode_batch(utc(2026, 5, 20, 16, 31, 40 + 4 * i), running=1, tokens=180 + 160 * i, usage=0.0, tput=60.47, accept=4.0, rank=None, draft=4) for i in range(2))))
    T.msg(a, "The output is degenerate: the reasoning repeats \"The user's question is 2+2.\" until max_tokens, while the server reports accept len 4.00 / "
             "accept rate 1.00 — every draft token accepted, which is what a repetition loop looks like to speculative decoding. With MTP, "
             "temperature 0.7 is outside what this checkpoint's card recommends (temperature=1.0, top_p=0.95, top_k=20); at low temperature the draft "
             "and target agree on the loop and nothing breaks it. Retrying with the recommended sampling parameters.",
          tags=("diagnosis",))
    T.msg(a, "", ("curl -s kpro5:30000/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\":\"/models/Qwen3.6-27B\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"max_tokens\":300,\"temperature\":1.0,\"top_p\":0.95,\"top_k\":20}' | python3 -c 'import json,sys; m=json.load(sys.stdin)[\"choices\"][0][\"message\"]; print(m[\"content\"])'",
                  "2 + 2 = 4."), tags=("smoke_test",))
    T.msg(u, "ok good. restart it so it picks up the generation_config defaults, I don't want clients to have to pass sampling params")
    T.msg(a, "I'll kill it and relaunch with `--sampling-defaults model` so the server uses generation_config.json values when a request omits them.",
          ("ssh qwen-kpro5 'pkill -f sglang.launch_server; sleep 6; nvidia-smi --query-gpu=memory.used --format=csv,noheader'", "0 MiB"))
    T.msg(a, "", ("ssh qwen-kpro5 'nohup " + LAUNCH + " --mem-fraction-static 0.85 --max-running-requests 16 --mamba-full-memory-ratio 0.5 "
                  "--sampling-defaults model > /root/qwen_mtp.log 2>&1 &'", ""), tags=("launch",))
    T.msg(a, "", ("sleep 45; ssh qwen-kpro5 'tail -2 /root/qwen_mtp.log; pgrep -f launch_server || echo NOT RUNNING'",
                  f"{sg(utc(2026, 5, 20, 16, 40, 51))}server_args=ServerArgs(model_path='/models/Qwen3.6-27B', tokenizer_path='/models/Qwen3.6-27B', ...)\nNOT RUNNING"),
          tags=("error",))
    T.msg(a, "My mistake — I used plain `nohup` again and the process died with the ssh session, exactly as before. Relaunching with setsid.",
          ("ssh qwen-kpro5 'setsid nohup " + LAUNCH + " --mem-fraction-static 0.85 --max-running-requests 16 --mamba-full-memory-ratio 0.5 "
           "--sampling-defaults model > /root/qwen_mtp.log 2>&1 < /dev/null & echo started'", "started"),
          tags=("diagnosis", "launch"))
    T.msg(a, "", ("sleep 5; ssh qwen-kpro5 'pgrep -fa sglang.launch_server | cut -c1-90'",
                  "5834 python3 -m sglang.launch_server --model-path /models/Qwen3.6-27B --tp 1 --port 30000 --host 0.0.0.0"))
    b2 = Boot(MODEL, tp=1, port=30000, mem_frac=0.85, weights_gb=51.9, shards=11, load_s=58, mla=False, context_len=262144,
              max_bs=16, max_running=16, spec=True, pid=5834, rng_seed=34)
    L2 = sglang_boot(utc(2026, 5, 20, 16, 42, 3), b2)
    L2.lines = [(t, x.replace("DeepseekV4", "Qwen3_5")) for t, x in L2.lines]
    draft_t = next(t for t, x in L2.lines if "Capture draft cuda graph begin" in x)
    mid = T.next_id
    while T.next_id < 6850:
        T.msg(a, "", ("sleep 15; ssh qwen-kpro5 'tail -2 /root/qwen_mtp.log'",
                      L2.tail(2, L2.start + (draft_t - L2.start) * ((T.next_id - mid + 1) / (6850 - mid)) - timedelta(seconds=2))))
    T.msg(a, "Process confirmed running with PID 5834 under setsid; it survived the ssh exit this time.",
          ("ssh qwen-kpro5 'ps -o pid,sid,etime,cmd -p 5834 | cut -c1-80'",
           "  PID   SID     ELAPSED CMD\n 5834  5834       03:52 python3 -m sglang.launch_server --model-path /models/Qwen3.6-27B"))
    T.msg(a, "Loading is done and graph capture is running.",
          ("ssh qwen-kpro5 'grep -E \"Loading safetensors checkpoint shards: +80%|Capture draft cuda graph begin\" /root/qwen_mtp.log | tail -2'",
           "Loading safetensors checkpoint shards:  80% Completed | 9/11 [00:47<00:10,  5.27s/it]\n"
           + next(x for t, x in L2.lines if "Capture draft cuda graph begin" in x)))
    assert T.next_id == 6852, T.next_id
    T.msg(u, "ready?", tags=("user_checkin",))
    T.msg(a, "Yes, it's up! 'The server is fired up and ready to roll!' Let me do a proper smoke test with the recommended sampling params.",
          ("ssh qwen-kpro5 'tail -1 /root/qwen_mtp.log'", L2.tail(1, L2.end())),
          ("curl -s kpro5:30000/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\":\"/models/Qwen3.6-27B\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"max_tokens\":400,\"temperature\":1.0,\"top_p\":0.95,\"top_k\":20}' | python3 -c 'import json,sys; m=json.load(sys.stdin)[\"choices\"][0][\"message\"]; print(m[\"reasoning_content\"][:300]); print(\"--\", m[\"content\"])'",
           "We are tasked with a simple arithmetic problem: 2 + 2 = ? We are tasked with a simple arithmetic problem: 2 + 2 = 2.2 + 2 = 2.2 + 2 = 2.2 + 2 = "
           "2.2 + 2 = 2.2 + 2 = 2.2 + 2 = 2.2 + 2 = 2.2 + 2 = 2.2 + 2 = 2.2 + 2 = 2.2 + 2 = 2.2 + 2 = 2...\n-- None"),
          tags=("readiness_claim", "smoke_test"))
    T.msg(a, "Not fine after all: even with temperature 1.0 / top_p 0.95 / top_k 20 the reasoning degenerates into \"2 + 2 = 2.2 + 2 = 2…\". "
             "So my earlier explanation (temperature 0.7) was incomplete. The server being \"ready\" only means the warmup request returned 200; "
             "it says nothing about output quality.",
          ("ssh qwen-kpro5 'grep \"Decode batch\" /root/qwen_mtp.log | tail -2'",
           "\n".join(decode_batch(utc(2026, 5, 20, 16, 47, 2 + 4 * i), running=1, tokens=240 + 160 * i, usage=0.0, tput=58.9, accept=3.94, rank=None, draft=4) for i in range(2))),
          tags=("diagnosis",))
    T.msg(a, "Isolating MTP: same request against a second instance without speculative decoding on port 30001 (fits: 16 running requests, short context).",
          ("ssh qwen-kpro5 'setsid nohup python3 -m sglang.launch_server --model-path /models/Qwen3.6-27B --tp 1 --port 30001 --reasoning-parser qwen3 "
           "--mem-fraction-static 0.40 --max-running-requests 4 --mamba-full-memory-ratio 0.5 --context-length 8192 > /root/qwen_nomtp.log 2>&1 < /dev/null & echo $!'",
           "6120"), tags=("launch",))
    T.msg(a, "", ("sleep 150; ssh qwen-kpro5 'tail -1 /root/qwen_nomtp.log'", "[2026-05-20 16:50:44] The server is fired up and ready to roll!"))
    T.msg(a, "", ("curl -s kpro5:30001/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\":\"/models/Qwen3.6-27B\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"max_tokens\":400,\"temperature\":1.0,\"top_p\":0.95,\"top_k\":20}' | python3 -c 'import json,sys; m=json.load(sys.stdin)[\"choices\"][0][\"message\"]; print(m[\"reasoning_content\"][:300]); print(\"--\", m[\"content\"])'",
                  "The user asks a basic arithmetic question: 2+2. That's 4. Simple; answer directly.\n-- 2 + 2 = **4**."),
          tags=("smoke_test",))
    T.msg(a, "Without MTP the same request is clean. So the degeneration comes from the speculative path, not sampling: accept rate ~1.0 with "
             "4-token drafts means the verifier is accepting the draft wholesale. The likely cause is the NEXTN draft head reading the GDN "
             "(linear-attention) state after the verify step without rolling it back for rejected positions — a hybrid-model spec-decoding bug "
             "class (cf. sglang#40843 / vllm#47087 on speculative loops). Next: try `--speculative-num-steps 1 --speculative-num-draft-tokens 2`, and if "
             "it still loops, serve kpro5 without MTP until upstream fixes it.",
          tags=("diagnosis",))
    T.msg(u, "ok, do the 1/2 test then decide")
    T.msg(a, "", ("ssh qwen-kpro5 'kill 5834; sleep 8; setsid nohup " + LAUNCH.replace("--speculative-num-steps 3", "--speculative-num-steps 1")
                  .replace("--speculative-num-draft-tokens 4", "--speculative-num-draft-tokens 2")
                  + " --mem-fraction-static 0.45 --max-running-requests 16 --mamba-full-memory-ratio 0.5 --sampling-defaults model > /root/qwen_mtp12.log 2>&1 < /dev/null & echo $!'",
                  "6377"), tags=("launch",))
    T.msg(a, "", ("until ssh qwen-kpro5 'grep -qE \"ready to roll|Traceback\" /root/qwen_mtp12.log'; do sleep 10; done; ssh qwen-kpro5 'tail -1 /root/qwen_mtp12.log'",
                  "[2026-05-20 16:58:12] The server is fired up and ready to roll!"), tags=("polling_loop",))
    T.msg(a, "", ("for i in 1 2 3; do curl -s kpro5:30000/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\":\"/models/Qwen3.6-27B\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"max_tokens\":400}' | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"choices\"][0][\"message\"][\"content\"])'; done",
                  "2 + 2 = 4.\n2 + 2 = 4\nThe answer is 4."), tags=("smoke_test",))
    T.msg(a, "With 1 step / 2 draft tokens the three samples are clean. Running a longer prompt to be sure it does not loop past a few hundred tokens.",
          ("curl -s kpro5:30000/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\":\"/models/Qwen3.6-27B\",\"messages\":[{\"role\":\"user\",\"content\":\"Explain in ~200 words why the sky is blue.\"}],\"max_tokens\":1200}' | python3 -c 'import json,sys,collections; t=json.load(sys.stdin)[\"choices\"][0][\"message\"][\"content\"]; w=t.split(); print(len(w), \"words; top trigram count:\", collections.Counter(zip(w,w[1:],w[2:])).most_common(1)[0][1])'",
           "211 words; top trigram count: 2"), tags=("smoke_test",))
    T.msg(a, "kpro5 now serves Qwen3.6-27B on :30000 with MTP at 1 step / 2 draft tokens, model sampling defaults, setsid-launched (survives ssh). "
             "Deeper drafts (3/4) loop on this hybrid model; I'd keep them off until the upstream spec-decoding fix for GDN state lands. The test "
             "instance on :30001 is still running — say if you want it killed.")
    T.msg(u, "kill the test one. thanks")
    T.msg(a, "", ("ssh qwen-kpro5 'kill 6120; sleep 3; pgrep -fa launch_server | cut -c1-60'",
                  "6377 python3 -m sglang.launch_server --model-path /models/Qwen"))
    T.msg(a, "Killed. Only the production server (PID 6377, port 30000) is running.")
    res = Result()
    res.files[FILE] = T.render()
    res.hints = T.hints
    res.counts[FILE] = T.next_id - FIRST_ID
    return res
