"""A small demo writer: inserts, updates and deletes rows in `demo.orders` to watch with `streamer tail`.

Uses the local admin account that deploy/local/mysql.sh created (password read from its file).
"""
from __future__ import annotations

import argparse
import os
import random
import time

import pymysql

from streamer import config as config_mod
from streamer.settings import argument


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--config", default=".local/streamer.yaml")
    p.add_argument("--admin-password-file", default=".local/secrets/admin.password")
    p.add_argument("--seconds", type=argument(float, 0, above=True), default=10.0)
    p.add_argument("--rate", type=argument(float, 0, above=True), default=20.0, help="changes per second")
    args = p.parse_args()
    cfg = config_mod.load(args.config)
    with open(os.path.expanduser(args.admin_password_file)) as fh:
        password = fh.read().strip()
    conn = pymysql.connect(host=cfg.mysql.host, port=cfg.mysql.port, user="admin",
                           password=password, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS demo")
        cur.execute("CREATE TABLE IF NOT EXISTS demo.orders (id INT PRIMARY KEY AUTO_INCREMENT, "
                    "customer VARCHAR(64) NOT NULL, amount DECIMAL(10,2) NOT NULL, "
                    "status ENUM('new','paid','shipped') NOT NULL DEFAULT 'new', "
                    "created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
        end = time.monotonic() + args.seconds
        n = 0
        while time.monotonic() < end:
            action = random.random()
            if action < 0.6:
                cur.execute("INSERT INTO demo.orders (customer, amount) VALUES (%s, %s)",
                            (random.choice(["ada", "grace", "linus", "barbara"]),
                             round(random.uniform(1, 500), 2)))
            elif action < 0.9:
                cur.execute("UPDATE demo.orders SET status = IF(status='new','paid','shipped') "
                            "ORDER BY RAND() LIMIT 1")
            else:
                cur.execute("DELETE FROM demo.orders ORDER BY id LIMIT 1")
            n += 1
            time.sleep(1.0 / args.rate)
    print(f"demo: {n} changes written to demo.orders; watch them with: "
          f"streamer tail {cfg.namespace}.demo.orders")


if __name__ == "__main__":
    main()
