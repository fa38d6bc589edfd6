import json,threading
def w():
  d=[json.dumps(list(range(j%500))) for j in range(20000)]
ts=[threading.Thread(target=w) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
